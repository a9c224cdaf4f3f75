"""The data: sources (URLs, globs, partitions), one reader per format family,
input checks and the synthetic corpus."""
