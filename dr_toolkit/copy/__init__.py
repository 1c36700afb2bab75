"""copy"""
