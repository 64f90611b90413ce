"""devicerl.runtime"""
