"""Peers of the bridge for the tests: fake games, hostile HTTP peers, kit games and launchable games."""
