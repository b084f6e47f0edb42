"""iclr25.sampling"""
