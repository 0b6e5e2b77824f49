"""Standard workloads on the public API: the Nexmark event stream and its queries."""
