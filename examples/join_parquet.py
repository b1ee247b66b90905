"""Read two Parquet datasets onto a local cluster and join them: GPUs if present, else CPU.

    python examples/join_parquet.py ORDERS_DIR CUSTOMERS_DIR --on customer_id
"""

import argparse

import gpuframe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("left", help="Parquet path, glob, directory or URL")
    parser.add_argument("right", help="Parquet path, glob, directory or URL")
    parser.add_argument("--on", required=True, help="key column(s), comma separated")
    parser.add_argument("--how", default="inner")
    args = parser.parse_args()

    with gpuframe.start_cluster() as engine:
        print(engine)
        left, right = gpuframe.read_parquet(args.left), gpuframe.read_parquet(args.right)
        joined = left.merge(right, on=args.on.split(","), how=args.how)
        print(f"{len(joined):,} rows over {joined.npartitions} partitions")
        print(joined.head())


if __name__ == "__main__":
    main()
