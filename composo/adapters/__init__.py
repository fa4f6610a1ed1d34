"""Built-in adapters, each a plugin module registered like any third-party plugin."""
