"""devicerl.runtime.loop"""
