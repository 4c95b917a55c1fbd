"""The `lumos` command line: thin click adapters over library functions."""
