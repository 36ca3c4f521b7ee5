"""The batch pipeline on Apache Spark: rebuild IndexFiles and export the key index at CommitLog scale.

Importing this package does not import PySpark; only :mod:`store.spark.session` does, when a job
actually starts, so the rest of ``rmq-query`` never pays for the JVM.
"""
