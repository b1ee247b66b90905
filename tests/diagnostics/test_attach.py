from distributed import Client, LocalCluster

from gpuframe.diagnostics.attach import attach
from gpuframe.diagnostics.stages import CLIENT_EVENT_OP


def test_the_client_streams_its_events_only_where_the_scheduler_takes_them():
    """A scheduler closes a client's stream on an operation it lacks: the client sends its
    events there only once the plugin that takes them is in place."""
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        assert attach(client)
        assert CLIENT_EVENT_OP in cluster.scheduler.stream_handlers
        # The plugin is kept where it is registered again (the first engine's records stay):
        # a scheduler without the operation is one whose plugin predates it.
        del cluster.scheduler.stream_handlers[CLIENT_EVENT_OP]
        assert not attach(client)
