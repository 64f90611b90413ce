"""devicerl.runtime.acting"""
