"""devicerl.algos"""
