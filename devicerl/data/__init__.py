"""devicerl.data"""
