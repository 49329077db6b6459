"""sdlocal's host side: job specs, the embedded S3, the platform, runtimes, the CLI."""
