"""Running code we do not trust: process trees, the fork server and zygote, the child (`Sandbox`),
graded ranks, the channel it answers through, submissions. Imports nothing else of the package."""
