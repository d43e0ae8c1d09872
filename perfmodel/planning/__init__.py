"""From profiles or predictors to a plan: batch plans (batch.py), online plans (online.py), what a plan
rests on (basis.py) and says about itself (context.py, fields.py), and the server configs it implies."""
