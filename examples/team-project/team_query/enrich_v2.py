"""The next version of the team's job, as a pull request would change it: `enrich` with a `tier` column added
(the region's tier, "primary" for the first region, "secondary" for the others). A projection with a new output
column: Spark's guide calls it allowed only if the sink allows the schema change, so the team rehearses it on a
live checkpoint of the current version before shipping (scenarios/enrich-upgrade.toml, tests/test_enrich.py).
"""
from __future__ import annotations

from team_query.enrich import check, query as current


def query(events, params):
    from pyspark.sql import functions as F

    enriched = current(events, params)
    first = str(params.get("regions", "eu,us,apac")).split(",")[0].strip()
    return enriched.withColumn("tier", F.when(F.col("region") == first, "primary").otherwise("secondary"))


query.oracle = "team_query.oracle:enriched_exactly_once"
query.check = check
