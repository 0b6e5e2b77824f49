"""Standard workloads on the public API: the Nexmark event stream and its queries q0-q8
(timely and Spark), and TPC-H views kept current under refresh."""
