"""iclr25.blackbox"""
