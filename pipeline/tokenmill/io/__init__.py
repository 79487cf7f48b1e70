"""Reading input shards and writing outputs atomically."""
