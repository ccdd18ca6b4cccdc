"""TL7xx: precision and backends."""
