"""The scheduler's pprof profiles: decoding them (``pprof``) and summarising them (``summary``). Pure."""
