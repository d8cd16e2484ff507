"""Webhook and event endpoints (filled in by the triggers work)."""
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST


@csrf_exempt
@require_POST
def webhook(request, name: str):
    return JsonResponse({"error": "not implemented"}, status=501)


@csrf_exempt
@require_POST
def event(request, topic: str):
    return JsonResponse({"error": "not implemented"}, status=501)
