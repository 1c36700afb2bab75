"""spark"""
