"""hbase"""
