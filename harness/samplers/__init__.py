"""What runs beside a run and samples it: the broker's lag, every process's resources."""
