"""Usage reports from the accounting store: window -> SQL aggregation -> figures -> formats (table ... html).

Flow: window.py (what time) -> access.py (whose jobs, read-only store) -> query.py (GROUP BY in the database)
-> build.py (ratios, grades, notes) -> formats.py / html.py (+ plots.py). job.py is the one-job view;
sacct_source.py feeds allocation-only figures from `sacct` through the same query.
"""
