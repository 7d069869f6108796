"""The measuring wing: benchmark programs (bench_*.py and the rest), their support code in lib/."""
