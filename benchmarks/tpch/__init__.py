"""TPC-H's 22 queries in gpuframe's API, their data from DuckDB's dbgen, their answers checked
against DuckDB on the same Parquet files."""
