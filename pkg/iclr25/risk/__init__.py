"""iclr25.risk"""
