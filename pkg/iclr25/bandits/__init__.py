"""iclr25.bandits"""
