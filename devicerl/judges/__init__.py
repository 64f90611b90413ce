"""devicerl.judges"""
