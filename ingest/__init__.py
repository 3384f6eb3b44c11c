"""Connectors and the lake: everything that turns raw inputs into Parquet partitions."""
