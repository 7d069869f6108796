"""Support code shared by the benchmark programs in bench/."""
