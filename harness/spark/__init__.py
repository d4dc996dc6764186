"""The Spark side: the query process and its checkpoint, the state dump and reader, real-time mode's rules."""

# triggers that read what is there and stop (the traffic goes first, the query drains it after)
CATCH_UP_TRIGGERS = ("once", "availableNow")
