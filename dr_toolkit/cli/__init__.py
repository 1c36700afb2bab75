"""The `drt` command line. Each capability registers its commands from its own module."""
