"""devicerl.runtime.reports"""
