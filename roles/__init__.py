"""One package per role; each exposes ``register(runtime, options)``."""
