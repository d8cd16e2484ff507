"""Static files' names: hashed when collectstatic has run, plain when it has not."""
from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class HashedOrPlainStorage(CompressedManifestStaticFilesStorage):
    """collectstatic writes each file under its content's hash with a gzipped copy beside it, and pages name that
    copy, which WhiteNoise sends compressed and cacheable for ever. A name its manifest lacks (nothing collected:
    a web server started without `serve`, the test suite) stays plain; WhiteNoise's finders serve it from the app."""

    manifest_strict = True  # a missing entry raises, and the plain name is used, instead of hashing a stale file

    def stored_name(self, name):
        try:
            return super().stored_name(name)
        except ValueError:
            return name
