"""What a run records and how it is read back: the producers' history and its latency summary, the timeline, the
run's state, the typed result, the environment, the events' placements, the calibrations a run is read against."""
