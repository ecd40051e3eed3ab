"""The version, as a literal, so it is right even when the package is vendored."""

__version__ = "0.1.0"
