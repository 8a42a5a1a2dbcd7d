"""The bundled scenario TOML files. A package only so that they ship inside the wheel."""
