"""Code only the tests (and the benchmarks that compare against it) use: kept out of the product."""
