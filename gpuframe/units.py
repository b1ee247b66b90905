"""How sizes read where people see them: reprs, notes and ``explain()``."""


def byte_text(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit below 1024 of it, up to GiB: '512 B', '3.2 MiB'."""
    for unit in ("B", "KiB", "MiB"):
        if nbytes < 1024:
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"
