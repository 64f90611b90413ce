"""devicerl.pool"""
