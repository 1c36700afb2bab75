"""dr-toolkit: keep a cold Hadoop-style cluster in step with a hot one, and fail over safely.

The library never imports Airflow; heavy clients (pyspark, boto3, confluent_kafka, kazoo,
hdfs) are imported inside the functions that use them.
"""

__version__ = "0.1.0"
