SELECT 1; -- local placeholder for another helper's migration; never committed
