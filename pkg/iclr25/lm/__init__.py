"""iclr25.lm"""
