"""devicerl.runtime.setup"""
