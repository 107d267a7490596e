"""Pattern subscriptions: parameterized sequence patterns over keyed link streams
(du Mouza, Rigaux, Scholl, SSDBM 2006) -- KMP_var, the pattern tree, the engines."""
