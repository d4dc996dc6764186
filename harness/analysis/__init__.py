"""Analysis: a run directory's records turned into figures, apart from judging (harness.judge) and rendering
(reports/). Spark's progress records (progress), consumer lag (lag), the source's task records (source_tasks),
where Spark ran its tasks (spark_tasks), Kafka consumer creations (consumers), resources and leaks (resources),
the producers against their rate (producers), and series.json, the figures over time the reports draw (series).
Pure functions of what a run recorded: nothing here starts, stops or judges anything.
"""
